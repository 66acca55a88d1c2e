"""The server's UIDs: version 4 UUIDs that stay unique whatever seeds the ``random`` module."""

from __future__ import annotations

import os
import random
import uuid

from accurate_testbed.apiserver.uids import new_uid


def test_uids_are_version_4_uuids_in_their_text_form() -> None:
    uid = new_uid()

    assert str(uuid.UUID(uid)) == uid
    assert uuid.UUID(uid).version == 4


def test_seeding_the_random_module_does_not_repeat_uids() -> None:
    random.seed(28)
    first = new_uid()
    random.seed(28)

    assert new_uid() != first


def test_a_forked_child_makes_other_uids_than_its_parent() -> None:
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child only reports its UID
        os.write(writing, new_uid().encode())
        os._exit(0)
    os.close(writing)
    theirs = os.read(reading, 64).decode()
    os.close(reading)
    os.waitpid(child, 0)

    assert theirs != new_uid()
