"""The store's lifecycle: gc, retention, the space budget and estimates."""
