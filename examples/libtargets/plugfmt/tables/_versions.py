NEXT = b"v2"  # the version no one tested
