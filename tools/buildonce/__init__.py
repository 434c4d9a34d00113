"""Build-once support for the noxfile: a torch wheelhouse, one wheel per package, a verified manifest."""
