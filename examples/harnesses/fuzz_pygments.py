"""pygments: highlight text with a lexer and a formatter the input picks (FuzzedDataProvider).
Follows OSS-Fuzz's pygments project (fuzz_lexers)."""
import sys

import atheris

with atheris.instrument_imports():
    import pygments
    import pygments.formatters
    import pygments.lexers

LEXERS = sorted(aliases[0] for _, _, aliases, _, _ in pygments.lexers.LEXERS.values() if aliases)
FORMATTERS = ["html", "latex", "rtf", "svg", "terminal256", "irc", "bbcode", "raw", "null"]


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    lexer = pygments.lexers.get_lexer_by_name(fdp.PickValueInList(LEXERS))
    formatter = pygments.formatters.get_formatter_by_name(fdp.PickValueInList(FORMATTERS))
    pygments.highlight(fdp.ConsumeUnicodeNoSurrogates(atheris.ALL_REMAINING), lexer, formatter)


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
