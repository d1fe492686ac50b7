"""Token derivation matches the design's vectors (docs/design.md); the minter never repeats; work ids ignore tokens."""

import pytest

from symfence.protocol.ids import TokenMinter, derive_token, is_valid_token, work_id_for

EPOCH = bytes(range(32))


@pytest.mark.parametrize(
    ("rank", "seq", "expected"),
    [
        (3, 7, "b9925048c3f550021c877ea2720bbe2df268af05ba3203f34239c64178441e84"),
        (3, 8, "83ef825968f34b7064e45e39a8cbd612d399299e16f1fbedfca2af60a6794a5f"),
        (4, 7, "c6dab219aed5e8520542ab108be18b3b9df3842ddbd8b47f89f537c244008487"),
        (0, 0, "26fb4f64534d0ac8a8dc7d11930afea8a649cfe0ea66d4a9281ab4e9e6cd5c40"),
    ],
)
def test_design_vectors(rank, seq, expected):
    assert derive_token(EPOCH, rank, seq) == expected


def test_bad_epoch_and_coordinates_rejected():
    with pytest.raises(ValueError):
        derive_token(b"short", 1, 1)
    with pytest.raises(ValueError):
        derive_token(EPOCH, -1, 1)
    with pytest.raises(ValueError):
        derive_token(EPOCH, 1, 2**64)


def test_minter_is_strictly_increasing_and_unique_across_ranks():
    m = TokenMinter(EPOCH)
    tokens = [m.mint(r) for r in (1, 2, 1, 3, 1)]
    assert len(set(tokens)) == 5
    assert m.issued == 5
    assert tokens[0] == derive_token(EPOCH, 1, 0)
    assert tokens[2] == derive_token(EPOCH, 1, 2)


def test_token_shape():
    assert is_valid_token("a" * 64)
    for bad in ["A" * 64, "a" * 63, "a" * 65, "g" * 64, None, 5, b"a" * 64, ["a" * 64]]:
        assert not is_valid_token(bad)


def test_work_id_is_stable_and_sensitive_to_what_runs():
    a = work_id_for("concolic", "t:f", "0" * 64, 2, {"x": 1, "y": "z"})
    assert a == work_id_for("concolic", "t:f", "0" * 64, 2, {"y": "z", "x": 1})
    assert a != work_id_for("concolic", "t:f", "0" * 64, 3, {"x": 1, "y": "z"})
    assert a != work_id_for("synthetic", "t:f", "0" * 64, 2, {"x": 1, "y": "z"})
    assert is_valid_token(a)
