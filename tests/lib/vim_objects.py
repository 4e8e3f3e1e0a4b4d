"""Plain pyvmomi helpers for tests that talk to the vSphere simulator directly (not through the
collection's client layer): find an object by name, wait for a task."""
import time


def find_object(si, kind, name):
    """The managed object of type ``kind`` named ``name`` (LookupError when there is none)."""
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [kind], True)
    try:
        for candidate in view.view:
            if candidate.name == name:
                return candidate
    finally:
        view.Destroy()
    raise LookupError(name)


def wait_task(task, timeout=10):
    """The task's result once it ends; its fault raised when it failed; TimeoutError after ``timeout`` s."""
    end = time.time() + timeout
    while task.info.state in ("queued", "running"):
        if time.time() > end:
            raise TimeoutError(task.info.descriptionId)
        time.sleep(0.05)
    if task.info.state == "error":
        raise task.info.error
    return task.info.result
