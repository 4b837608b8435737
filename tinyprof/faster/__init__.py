"""Chapter 08's wing: make it faster. ``pipeline`` is a slow but correct training step with six
planted bottlenecks and their fixes."""
