"""The science runtime: four agents answer a research question with evidence, offline."""
