"""Request and response schemas. Inputs forbid unknown fields; outputs never expose ORM objects or paths."""
