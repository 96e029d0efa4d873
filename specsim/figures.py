"""matplotlib figures that leave pyplot's state alone.

specsim's figures are :class:`matplotlib.figure.Figure` objects made directly, never through ``pyplot``: no
backend is chosen (``matplotlib.use`` is never called), no figure is registered with pyplot, so a Jupyter
session keeps its inline backend after a report or a plot and a script's own ``plt.show()`` is untouched.
``Figure.savefig`` writes PNG and SVG through matplotlib's own canvases, and a notebook shows a returned
figure as it shows any other. A utility below every layer (docs/architecture.md).
"""

from __future__ import annotations

from typing import Any


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **kwargs: Any):
    """(figure, axes) as ``pyplot.subplots`` gives them, the figure made without pyplot.

    Args:
        nrows, ncols: the grid of axes.
        figsize: (width, height), inches.
        **kwargs: passed to :meth:`matplotlib.figure.Figure.subplots` (``squeeze``, ``sharex``, ...).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def colormap(name: str):
    """The registered matplotlib colormap ``name`` (``"tab10"``, ``"Dark2"``), as ``pyplot.get_cmap`` gives it."""
    import matplotlib

    return matplotlib.colormaps[name]
