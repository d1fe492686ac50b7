"""email-validator: validate an address without DNS (raw bytes, decoded)."""
import sys

import atheris

with atheris.instrument_imports():
    import email_validator


def TestOneInput(data):
    try:
        address = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        email_validator.validate_email(address, check_deliverability=False)
    except email_validator.EmailNotValidError:
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
