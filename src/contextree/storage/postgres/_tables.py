"""The names of contextree's tables and constraints, which the schema creates and the error
mapping recognises."""

from __future__ import annotations

SESSIONS = "contextree_sessions"
ENTRIES = "contextree_entries"
SCHEMA_VERSIONS = "contextree_schema_version"
SETTINGS = "contextree_settings"  # (name, value): a database's search settings
TRIGRAMS = "trigrams"  # the setting that is there while the trigram index is on
TRIGRAM_INDEX = f"{ENTRIES}_trgm_idx"  # entries' search_text, pg_trgm
APPEND_FUNCTION = "contextree_append"
ENTRY_TEXT_FUNCTION = "contextree_entry_text"  # an entry line's searchable text
CONTENT_TEXT_FUNCTION = "contextree_content_text"  # a message content's text and thinking
SEARCH_VECTOR_FUNCTION = "contextree_search_vector"  # that text's tsvector

ENTRY_ID_KEY = f"{ENTRIES}_pkey"  # (session_id, id): duplicate ids are impossible
SESSION_ID_KEY = f"{SESSIONS}_pkey"
PARENT_KEY = f"{ENTRIES}_parent_fkey"  # (session_id, parent_id): the parent exists
TARGET_KEY = f"{ENTRIES}_target_fkey"  # (session_id, target_id): a leaf move's target exists

NO_SCHEMA = "run contextree.storage.postgres.create_schema(url) first"
