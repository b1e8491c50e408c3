"""eBird input and atomic output."""
