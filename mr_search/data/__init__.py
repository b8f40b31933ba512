"""Datasets in verl's RL layout: the embedded world, FlashRAG question sets, wiki-18 downloads."""
