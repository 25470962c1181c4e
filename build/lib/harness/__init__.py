"""overlaybench: measure what a container overlay network costs."""

__version__ = "0.1.0"
