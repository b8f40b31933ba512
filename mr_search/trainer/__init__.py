"""The MR-Search trainer's method: the attempt-level advantage step over verl's V1 sync trainer."""
