"""Developer tools run from the repository root: setting up the virtualenv, the tests, the demo,
and rendering the texts the plugin prints without click."""
