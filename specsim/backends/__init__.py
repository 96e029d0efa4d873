"""Execution backends for real models. ``specsim.backends.torch`` (needs the ``[torch]`` extra) runs real
speculative decoding with real target and drafter models under specsim's policies."""
