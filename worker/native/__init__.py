"""Native programs (C/C++ binaries): engines that generate inputs, oracles that run them."""
