"""jinja2: compile and render a template in the sandbox (FuzzedDataProvider)."""
import sys

import atheris

with atheris.instrument_imports():
    import jinja2
    from jinja2 import sandbox


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    env = sandbox.SandboxedEnvironment()
    try:
        env.from_string(fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())).render()
    except (jinja2.TemplateError, jinja2.exceptions.SecurityError):
        return


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
