"""One folder listed and stat'ed in C (see ``_listing.c``)."""

def list_folder(
    path: str, stats: bool = False
) -> (
    tuple[
        list[str],
        bytes,
        bytes,
        list[tuple[str, int]],
        list[tuple[str, int, int, int, int, int, int]] | None,
    ]
    | None
): ...
