"""Harness: ``zipfile`` reading the central directory and every stored (uncompressed) member.

Documented errors: ``zipfile.BadZipFile`` and ``zipfile.LargeZipFile`` for a malformed archive,
``NotImplementedError`` for an unsupported compression method and ``RuntimeError`` for an
encrypted member read without a password. Only stored members are read, so decompression stays
in zipfile's own code (the C decompressors are not the parser under test).
"""

import io
import zipfile

MODULES = ("zipfile",)


def target(data: bytes) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                info.filename, info.file_size, info.date_time  # noqa: B018 (parsed fields)
                if info.compress_type == zipfile.ZIP_STORED:
                    archive.read(info)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError):
        pass
