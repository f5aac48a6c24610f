"""What the notebooks import: charts and controls over the client."""
