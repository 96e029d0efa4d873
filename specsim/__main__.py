"""``python -m specsim ...``: the ``specsim`` command (:func:`specsim.cli.main`), for an environment whose
scripts folder is not on PATH."""

from specsim.cli import main

if __name__ == "__main__":
    main()
