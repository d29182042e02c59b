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
def check_tree(
    root: str,
    rel: str,
    key: bytes,
    excluded: bool,
    old: dict[str, tuple[object, ...]],
    index_sig: bytes,
    dirty: list[str],
    fields: tuple[int, int, int, int, int],
    /,
) -> list[tuple[str, bool]]: ...
def digest(*parts: bytes) -> bytes: ...
