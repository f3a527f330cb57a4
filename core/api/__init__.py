"""The REST API's base pieces every app's API builds on: error envelope, parsers, renderers, pagination,
filter sets and optimistic concurrency (DRF). Below the apps: it imports core and the engine only."""
