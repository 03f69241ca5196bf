"""The data layer: where files live, the question sets and corpora and their loaders, and what every output folder
keeps (locks, run manifests, checksummed inventories, resumable JSON lines, training checkpoints). It imports no other
layer of the library."""
