"""Pillow: open an image of any format from raw bytes and decode it (the plugins load on first use)."""
import io
import sys
import warnings

import atheris

with atheris.instrument_imports():
    from PIL import Image

warnings.simplefilter("ignore")
Image.MAX_IMAGE_PIXELS = 1 << 16  # a decompression bomb is an error, not an hour of decoding


def TestOneInput(data):
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            im.convert("RGB")
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError):
        return


def main():
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
