"""The sync's crypto: what it seals opens only with its key, as what it claims to be, whole."""

from __future__ import annotations

import copy
import os
import pickle
import traceback

import pytest

from tillage.crypto import (
    OVERHEAD,
    BadKeyError,
    RecoveryKey,
    key_check,
    name_of,
    open_document,
    open_object,
    seal_document,
    seal_object,
    verify_key_check,
)
from tillage.errors import IntegrityError, all_error_classes, catalogue_problems

OBJECT_ID = bytes(range(32))


@pytest.fixture
def key() -> RecoveryKey:
    return RecoveryKey.generate()


@pytest.mark.parametrize("size", [0, 1, 1000, 1 << 20])
def test_a_sealed_object_opens_to_its_record(key: RecoveryKey, size: int) -> None:
    record = os.urandom(size)
    sealed = seal_object(key, OBJECT_ID, record)
    assert len(sealed) == size + OVERHEAD
    assert open_object(key, OBJECT_ID, sealed) == record


def test_sealing_twice_gives_different_bytes(key: RecoveryKey) -> None:
    record = b"the same record"
    first, second = seal_object(key, OBJECT_ID, record), seal_object(key, OBJECT_ID, record)
    assert first != second
    assert open_object(key, OBJECT_ID, first) == open_object(key, OBJECT_ID, second) == record


def test_a_sealed_object_holds_no_plaintext(key: RecoveryKey) -> None:
    record = b"SECRET-WORKSPACE-CONTENT " * 40
    sealed = seal_object(key, OBJECT_ID, record)
    assert b"SECRET" not in sealed
    assert OBJECT_ID not in sealed


def test_every_changed_byte_of_a_sealed_object_is_an_integrity_error(key: RecoveryKey) -> None:
    sealed = seal_object(key, OBJECT_ID, b"a small record")
    for position in range(len(sealed)):
        for flip in (0x01, 0x80):
            tampered = bytearray(sealed)
            tampered[position] ^= flip
            with pytest.raises(IntegrityError):
                open_object(key, OBJECT_ID, bytes(tampered))


def test_a_truncated_or_extended_sealed_object_is_an_integrity_error(key: RecoveryKey) -> None:
    sealed = seal_object(key, OBJECT_ID, b"a small record")
    for cut in range(len(sealed)):
        with pytest.raises(IntegrityError):
            open_object(key, OBJECT_ID, sealed[:cut])
    with pytest.raises(IntegrityError):
        open_object(key, OBJECT_ID, sealed + b"\0")


def test_an_object_does_not_open_under_another_key(key: RecoveryKey) -> None:
    sealed = seal_object(key, OBJECT_ID, b"record")
    with pytest.raises(IntegrityError) as caught:
        open_object(RecoveryKey.generate(), OBJECT_ID, sealed)
    assert caught.value.code == -32067
    assert caught.value.details == {"object": OBJECT_ID.hex()}


def test_an_object_moved_to_another_identity_does_not_open(key: RecoveryKey) -> None:
    one, two = os.urandom(32), os.urandom(32)
    sealed_one = seal_object(key, one, b"record one")
    sealed_two = seal_object(key, two, b"record two")
    with pytest.raises(IntegrityError):
        open_object(key, two, sealed_one)
    with pytest.raises(IntegrityError):
        open_object(key, one, sealed_two)


def test_a_sealed_object_from_an_unknown_format_version_says_so(key: RecoveryKey) -> None:
    sealed = bytearray(seal_object(key, OBJECT_ID, b"record"))
    sealed[0] = 9
    with pytest.raises(IntegrityError) as caught:
        open_object(key, OBJECT_ID, bytes(sealed))
    assert "version 9" in caught.value.message


def test_a_document_round_trips_as_its_json_values(key: RecoveryKey) -> None:
    doc = {"head": "ab" * 32, "seq": 7, "parents": ["cd" * 32], "note": "héllo", "x": None}
    sealed = seal_document(key, "refs/abc", doc)
    assert open_document(key, "refs/abc", sealed) == doc
    assert b"head" not in sealed and b"ab" * 8 not in sealed


def test_a_document_moved_to_another_name_does_not_open(key: RecoveryKey) -> None:
    main = seal_document(key, "refs/aaaa", {"head": "1"})
    other = seal_document(key, "refs/bbbb", {"head": "2"})
    with pytest.raises(IntegrityError):
        open_document(key, "refs/bbbb", main)
    with pytest.raises(IntegrityError):
        open_document(key, "refs/aaaa", other)
    with pytest.raises(IntegrityError):
        open_document(key, "leases/aaaa", main)


def test_an_object_and_a_document_never_open_as_each_other(key: RecoveryKey) -> None:
    name = "refs/ab"
    document = seal_document(key, name, {"head": "1"})
    with pytest.raises(IntegrityError):
        open_object(key, name.encode(), document)
    sealed = seal_object(key, name.encode(), b'{"head":"1"}')
    with pytest.raises(IntegrityError):
        open_document(key, name, sealed)


def test_every_changed_byte_of_a_sealed_document_is_an_integrity_error(key: RecoveryKey) -> None:
    sealed = seal_document(key, "leases/ab", {"holder": "m1"})
    for position in range(len(sealed)):
        tampered = bytearray(sealed)
        tampered[position] ^= 0x40
        with pytest.raises(IntegrityError):
            open_document(key, "leases/ab", bytes(tampered))


def test_the_key_check_opens_with_its_key_only(key: RecoveryKey) -> None:
    check = key_check(key, {"format": 1})
    assert verify_key_check(key, check)["format"] == 1
    with pytest.raises(IntegrityError) as caught:
        verify_key_check(RecoveryKey.generate(), check)
    assert caught.value.message == "the recovery key does not open this remote"
    with pytest.raises(IntegrityError):
        verify_key_check(key, check[:-1])


def test_a_document_that_is_not_the_key_check_is_refused_as_config(key: RecoveryKey) -> None:
    with pytest.raises(IntegrityError):
        verify_key_check(key, seal_document(key, "config", {"head": "x"}))


def test_names_are_keyed_hashes_laid_out_by_kind(key: RecoveryKey) -> None:
    object_name = name_of(key, "object", OBJECT_ID.hex())
    folder, fan, digest = object_name.split("/")
    assert folder == "objects" and len(digest) == 64 and fan == digest[:2]
    assert int(digest, 16) >= 0
    ref = name_of(key, "ref", "main")
    lease = name_of(key, "lease", "main")
    assert ref.startswith("refs/") and lease.startswith("leases/")
    assert ref.split("/")[1] != lease.split("/")[1]  # the kind is hashed in
    assert name_of(key, "ref", "main") == ref  # stable
    assert name_of(RecoveryKey.generate(), "ref", "main") != ref  # keyed
    assert "main" not in ref and OBJECT_ID.hex() not in object_name
    with pytest.raises(ValueError):
        name_of(key, "snapshot", "x")


def test_the_nul_separator_keeps_kind_and_ident_apart(key: RecoveryKey) -> None:
    assert name_of(key, "ref", "a") != name_of(key, "ref", "a\0")


def test_a_key_round_trips_through_hex() -> None:
    key = RecoveryKey.generate()
    text = key.hex()
    assert len(text) == 64
    assert RecoveryKey.from_hex(text) == key
    assert RecoveryKey.from_hex(f"  {text.upper()}\n") == key
    assert RecoveryKey.from_hex(text) is not key
    assert hash(RecoveryKey.from_hex(text)) == hash(key)
    assert RecoveryKey.generate() != key


@pytest.mark.parametrize(
    "text", ["", "ab", "g" * 64, "a" * 63, "a" * 65, "0x" + "a" * 62, "a" * 32 + " " + "a" * 31]
)
def test_a_malformed_key_is_bad_key_and_is_not_echoed(text: str) -> None:
    with pytest.raises(BadKeyError) as caught:
        RecoveryKey.from_hex(text)
    error = caught.value
    assert error.code == -32293 and error.name == "sync.bad_key"
    assert error.code == BadKeyError.code
    if len(text) > 4:
        assert text.strip() not in error.message
        assert text.strip() not in str(error.envelope())


def test_the_key_never_shows_in_repr_str_format_or_errors() -> None:
    key = RecoveryKey.generate()
    secret = key.hex()
    shown = [repr(key), str(key), f"{key}", f"{key!r}", repr([key]), repr({"k": key})]
    for text in shown:
        assert secret not in text and secret.upper() not in text
        assert key.fingerprint in text
    for name in ("_material", "_object", "_name", "_document"):
        subkey = getattr(key, name).hex()
        assert all(subkey not in text for text in shown)
    sealed = seal_object(key, OBJECT_ID, b"x")
    errors: list[BaseException] = []
    for attempt in (
        lambda: open_object(RecoveryKey.generate(), OBJECT_ID, sealed),
        lambda: open_object(key, OBJECT_ID, sealed[:-1]),
        lambda: verify_key_check(key, key_check(RecoveryKey.generate())),
        lambda: open_document(key, "refs/x", sealed),
    ):
        with pytest.raises(IntegrityError) as caught:
            attempt()
        errors.append(caught.value)
    for error in errors:
        text = "".join(traceback.format_exception(error)) + str(error.envelope())
        assert secret not in text
        assert all(getattr(key, n).hex() not in text for n in ("_object", "_name", "_document"))


def test_a_key_is_immutable_and_never_pickled() -> None:
    key = RecoveryKey.generate()
    with pytest.raises(AttributeError):
        key._material = b"\0" * 32  # type: ignore[misc]
    with pytest.raises(TypeError):
        pickle.dumps(key)
    assert copy.copy(key) is key and copy.deepcopy(key) is key


def test_a_key_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(BadKeyError):
        RecoveryKey(b"\0" * 31)


def test_the_sync_errors_fit_the_catalogue() -> None:
    import tillage.crypto.errors  # noqa: F401

    assert catalogue_problems(list(all_error_classes())) == []


def test_importing_the_crypto_package_loads_no_libsodium() -> None:
    import subprocess
    import sys

    code = "import sys, tillage.crypto; print('nacl' in sys.modules, 'json' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
