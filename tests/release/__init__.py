"""Tests of the release artifacts: the frozen plugin, its archive, the krew manifest, the image."""
