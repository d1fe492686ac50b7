"""A record parser that leans on its library's long-named C helpers; crashes on one payload."""

from __future__ import annotations

from examples.longnames import _accelerator

beschleuniger = __import__(_accelerator.NAME)  # as `import <that module>` would, by its (long) name
_HEADER = getattr(beschleuniger, "checksum_of_the_record_header_including_the_magic_and_the_length_fields")
_PAYLOAD = getattr(beschleuniger,
                   "prüfsumme_über_den_nutzdatenblock_einschließlich_aller_füllbytes_am_ende")
_HEX = getattr(beschleuniger, "hexadecimal rendering with spaces in its registered name")


def überprüfe_den_datensatz_mit_einem_absichtlich_sehr_langen_funktionsnamen_für_tests(data: bytes) -> int:
    if len(data) < 6 or data[:2] != b"LN":
        return 0
    length = data[2]
    payload = data[3:3 + length]
    total = _HEADER(data[:3]) ^ _PAYLOAD(payload)
    if _HEX(payload[:2]) == b"4142":
        total += 1
    if payload == b"BOOM":
        raise ValueError("ein Fehler in einer Funktion mit einem sehr langen, nicht-ASCII Namen")
    return total


def target(data: bytes) -> None:
    überprüfe_den_datensatz_mit_einem_absichtlich_sehr_langen_funktionsnamen_für_tests(data)
