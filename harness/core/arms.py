"""The names of an A/B run's arms: each mode M of the comparison runs as M@base and M@head."""

ARM_SEP = "@"                   # MODE@LABEL
BASE, HEAD = "base", "head"     # the labels of an A/B run's arms
