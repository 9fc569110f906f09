"""The operator's console: a browser UI over the admin API, served at `/admin/ui/`.

The page is static (HTML, CSS, ES modules, no build step) and ships as package data. It
holds no data itself, so it is served without a key; every data call it makes goes to
`/admin/v1` with the admin key the operator typed in, as a bearer header.
"""
