/*
 * The select-all box in the header of the Jobs and DLQ tables: ticking it ticks every row box
 * of its table (and unticking clears them); it shows ticked when every row is, and half-ticked
 * when some are. Listeners sit on the document, so a table that live refresh swapped in works
 * the same. Without JavaScript the box is not shown (CSS keys on the class set here) and rows
 * are ticked one by one.
 */
(function () {
  "use strict";

  document.documentElement.classList.add("awa-js");

  function rowBoxes(header) {
    var table = header.closest("table");
    if (!table) {
      return [];
    }
    var name = header.getAttribute("data-awa-select-all");
    return Array.prototype.filter.call(
      table.querySelectorAll("tbody input[type=checkbox]"),
      function (box) { return box.name === name && !box.disabled; }
    );
  }

  function reflect(header) {
    var boxes = rowBoxes(header);
    var ticked = boxes.filter(function (box) { return box.checked; }).length;
    header.checked = boxes.length > 0 && ticked === boxes.length;
    header.indeterminate = ticked > 0 && ticked < boxes.length;
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (!(target instanceof HTMLInputElement) || target.type !== "checkbox") {
      return;
    }
    if (target.hasAttribute("data-awa-select-all")) {
      rowBoxes(target).forEach(function (box) { box.checked = target.checked; });
      target.indeterminate = false;
      return;
    }
    var table = target.closest("table");
    var header = table && table.querySelector("thead input[data-awa-select-all]");
    if (header) {
      reflect(header);
    }
  });
})();
