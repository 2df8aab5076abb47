"""The model stage: endpoints, the HTTP client, scoring, the score cache and fusion."""
