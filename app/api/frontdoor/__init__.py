"""The front door: the pieces every request passes before its route (docs/front-door.md)."""
