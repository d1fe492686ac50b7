"""Harness: ``tarfile`` reading an uncompressed archive from memory and every regular member.

Documented errors: ``tarfile.TarError`` and its subclasses (``ReadError``, ``HeaderError``, ...)
for a malformed archive.
"""

import io
import tarfile

MODULES = ("tarfile",)


def target(data: bytes) -> None:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive.getmembers():
                member.name, member.size, member.mode, member.linkname  # noqa: B018 (parsed fields)
                if member.isfile():
                    stream = archive.extractfile(member)
                    if stream is not None:
                        stream.read()
    except tarfile.TarError:
        pass
