"""A thread whose failure fails the test: join() re-raises it in the test's own thread.

pytest only warns about an exception raised in another thread; an assertion made
there must come back to the main thread to count.
"""
import threading


class CheckedThread(threading.Thread):
    def __init__(self, target, *args, name: str | None = None) -> None:
        super().__init__(target=target, args=args, name=name, daemon=True)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            super().run()
        except BaseException as e:  # kept for join(), which raises it where the test can see it
            self.error = e

    def join(self, timeout: float | None = None) -> None:
        super().join(timeout)
        if self.is_alive():
            raise AssertionError(f"thread {self.name} still running after {timeout} s")
        if self.error is not None:
            raise self.error


def started(target, *args, name: str | None = None) -> CheckedThread:
    t = CheckedThread(target, *args, name=name)
    t.start()
    return t
