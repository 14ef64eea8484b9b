//! A fake CRI runtime for tests (filled in by its owner).
