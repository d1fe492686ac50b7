"""A target whose library names are longer than 64 characters, with a non-ASCII identifier (issue 17).

`_accelerator` plays a C-accelerated helper module (no source file, C functions), the way
parser libraries ship one: the engine counts a concretisation at each of its functions under
``c:<module>.<function>``, and those names are what the wire must carry.
"""
