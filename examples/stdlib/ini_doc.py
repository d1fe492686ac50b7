"""Harness: ``configparser`` on the input decoded as Latin-1 (instrument ``configparser``)."""

import configparser


def target(data: bytes) -> None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(data.decode("latin-1"))
    except configparser.Error:
        return
    for section in parser.sections():
        for key in parser[section]:
            parser[section][key]
