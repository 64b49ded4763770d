document.getElementById("app")!.textContent = "burrow";
