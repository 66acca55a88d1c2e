"""The script PyInstaller freezes: PyInstaller needs a file to start from, not an entry point."""

from kubectl_accurate.entry import main

main()
