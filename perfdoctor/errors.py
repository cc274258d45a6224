"""The one exception type for bad input, and warnings collected on the way."""


class InputError(Exception):
    """Bad input: a file, key or value the user must fix. The CLI prints it as one line and exits 2."""

    def __init__(self, where: str, key: str, problem: str):
        self.where, self.key, self.problem = where, key, problem
        super().__init__(f"{where}: {key}: {problem}" if key else f"{where}: {problem}")
