"""The one error type the noxfile turns into a one-line failure."""


class BuildError(Exception):
    """A problem with the wheelhouse, dist/ or the manifest, worded for one line."""
