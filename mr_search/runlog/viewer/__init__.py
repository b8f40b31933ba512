"""A static, self-contained HTML trajectory viewer for dumped meta-episodes."""
