"""Worker-side triage: symbolising native crashes and minimizing crashing inputs (issue 19)."""
