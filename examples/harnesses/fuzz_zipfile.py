"""zipfile (the demo's second parser, examples/parsers/zip_archive.py): the central directory and
every stored member (raw bytes)."""
import io
import sys

import atheris

with atheris.instrument_imports():
    import zipfile


def TestOneInput(data):
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                info.filename, info.file_size, info.date_time  # noqa: B018 (parsed fields)
                if info.compress_type == zipfile.ZIP_STORED:
                    archive.read(info)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError):
        pass


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
