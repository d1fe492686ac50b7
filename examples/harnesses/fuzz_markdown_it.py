"""markdown-it-py: parse and render Markdown (FuzzedDataProvider).
Follows OSS-Fuzz's markdown-it-py project (fuzz_markdown)."""
import sys

import atheris

with atheris.instrument_imports():
    from markdown_it import MarkdownIt


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    md = MarkdownIt("commonmark" if fdp.ConsumeBool() else "default")
    text = fdp.ConsumeUnicodeNoSurrogates(atheris.ALL_REMAINING)
    md.parse(text)
    md.render(text)


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
