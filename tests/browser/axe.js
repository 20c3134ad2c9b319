async ([colourRules, colour]) => {
    const rules = {"label-content-name-mismatch": {enabled: true}};
    for (const id of colourRules) rules[id] = {enabled: colour};
    const result = await axe.run(document, {
        runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
        rules,
    });
    const ran = [result.passes, result.violations, result.incomplete, result.inapplicable];
    return {
        rules: ran.flat().map((rule) => rule.id),
        violations: result.violations.map((v) => ({
            id: v.id, impact: v.impact, help: v.help,
            targets: v.nodes.slice(0, 3).map((n) => n.target.join(" ")),
            count: v.nodes.length,
        })),
    };
}
