"""Request traces: format and validation, converters, length models, synthetic generator."""
