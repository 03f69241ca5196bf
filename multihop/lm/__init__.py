"""The LM layer: the offline model registry, the local and served engines, ``make_lm``/``configure_lm`` and the LM
options every command takes, ``multihop serve`` and the loopback server. It imports the data layer only."""
