"""Few-shot examples of the φ-Decoding release, reproduced as data with attribution.

Source: ``xufangzhi/phi-Decoding`` (Xu et al., ACL 2025), ``data/math_example.py``
(``GSM_COT_8_SHOT``, ``MATH_COT_4_SHOT``) and ``data/logic_example.py``
(``LOGIC_MRC_COT_4_SHOT``); the MFS release (``martingale.py`` of
``miraclehetech/EACL2026-Martingale-Foresight-Sampling``) carries the same three texts.
The GSM8K examples are the chain-of-thought exemplars of Wei et al. (2022); the logic
examples are ReClor training questions (Yu et al., 2020); the MATH examples come from the
MATH training set (Hendrycks et al., 2021). The text is kept byte for byte: the system
prompts the model saw in the paper's runs.
"""

from __future__ import annotations

__all__ = ["GSM_COT_8_SHOT", "LOGIC_MRC_COT_4_SHOT", "MATH_COT_4_SHOT"]

GSM_COT_8_SHOT = r"""Example 1:
The question is : There are 15 trees in the grove. Grove workers will plant trees in the grove today. After they are done, there will be 21 trees. How many trees did the grove workers plant today?
The reasoning steps are:

There are 15 trees originally. Then there were 21 trees after some more were planted. 
So there must have been 21 - 15 = 6.
The answer is: \boxed{6}.<end_of_reasoning>


Example 2:
The question is: If there are 3 cars in the parking lot and 2 more cars arrive, how many cars are in the parking lot?
The reasoning steps are:

There are originally 3 cars. 
2 more cars arrive. 
3 + 2 = 5.
The answer is: \boxed{5}.<end_of_reasoning>


Example 3:
The question is: Leah had 32 chocolates and her sister had 42. If they ate 35, how many pieces do they have left in total?
The reasoning steps are:

Originally, Leah had 32 chocolates. Her sister had 42. 
So in total they had 32 + 42 = 74. 
After eating 35, they had 74 - 35 = 39.
The answer is: \boxed{39}.<end_of_reasoning>


Example 4:
The question is: Jason had 20 lollipops. He gave Denny some lollipops. Now Jason has 12 lollipops. How many lollipops did Jason give to Denny?
The reasoning steps are:

Jason started with 20 lollipops.
Then he had 12 after giving some to Denny.
So he gave Denny 20 - 12 = 8.
The answer is: \boxed{8}.<end_of_reasoning>


Example 5:
The question is: Shawn has five toys. For Christmas, he got two toys each from his mom and dad. How many toys does he have now?
The reasoning steps are:

Shawn started with 5 toys. 
If he got 2 toys each from his mom and dad, then that is 4 more toys. 5 + 4 = 9. 
The answer is: \boxed{9}.<end_of_reasoning>


Example 6:
The question is: There were nine computers in the server room. Five more computers were installed each day, from monday to thursday. How many computers are now in the server room?
The reasoning steps are:

There were originally 9 computers.
For each of 4 days, 5 more computers were added.
So 5 * 4 = 20 computers were added. 9 + 20 is 29.
The answer is: \boxed{29}.<end_of_reasoning>


Example 7:
The question is: Michael had 58 golf balls. On tuesday, he lost 23 golf balls. On wednesday, he lost 2 more. How many golf balls did he have at the end of wednesday?
The reasoning steps are:

Michael started with 58 golf balls.
After losing 23 on tuesday, he had 58 - 23 = 35.
After losing 2 more, he had 35 - 2 = 33 golf balls.
The answer is: \boxed{33}.<end_of_reasoning>


Example 8:
The question is: Olivia has $23. She bought five bagels for $3 each. How much money does she have left?
The reasoning steps are:

Olivia had 23 dollars.
5 bagels for 3 dollars each will be 5 x 3 = 15 dollars.
So she has 23 - 15 dollars left. 23 - 15 is 8.
The answer is: \boxed{8}.<end_of_reasoning>"""

MATH_COT_4_SHOT = r"""Example 1:
The question is : Gracie and Joe are choosing numbers on the complex plane. Joe chooses the point $1+2i$. Gracie chooses $-1+i$. How far apart are Gracie and Joe's points?
The reasoning steps are:

The distance between two points $(x_1,y_1)$ and $(x_2,y_2)$ in the complex plane is given by the formula $\sqrt{(x_2-x_1)^2+(y_2-y_1)^2}$.
In this case, Joe's point is $(1,2)$ and Gracie's point is $(-1,1)$.
So the distance between their points is $\sqrt{((-1)-(1))^2+((1)-(2))^2}=\sqrt{(-2)^2+(-1)^2}=\sqrt{4+1}=\sqrt{5}$.
Therefore, Gracie and Joe's points are $\boxed{\sqrt{5}}$ units apart.
The answer is: \boxed{\sqrt{5}}<end_of_reasoning>


Example 2:
The question is : Convert $10101_3$ to a base 10 integer.
The reasoning steps are:

$10101_3 = 1 \cdot 3^4 + 0 \cdot 3^3 + 1 \cdot 3^2 + 0 \cdot 3^1 + 1 \cdot 3^0 = 81 + 9 + 1 = \boxed{91}$.
The answer is: \boxed{91}<end_of_reasoning>


Example 3:
The question is :
The points $(x, y)$ represented in this table lie on a straight line. The point $(28, t)$ lies on the same line. What is the value of $t?$ \begin{tabular}{c|c}
$x$ & $y$ \\ \hline
1 & 7 \\
3 & 13 \\
5 & 19 \\
\end{tabular}

The reasoning steps are:
The slope of a line passing through two points $(x_1, y_1)$ and $(x_2, y_2)$ is given by $\frac{y_2 - y_1}{x_2 - x_1}$.
Using the points $(1, 7)$ and $(5, 19)$ from the table, we find that the slope of the line passing through these points is $\frac{19 - 7}{5 - 1} = \frac{12}{4} = 3$.
Since the point $(28, t)$ lies on the same line, the slope of the line passing through $(28, t)$ and $(5, 19)$ is also $3$.
Using the slope-intercept form of a line, $y = mx + b$, where $m$ is the slope and $b$ is the $y$-intercept, we can find the equation of the line passing through $(5, 19)$ with a slope of $3$.
Substituting the coordinates of the point $(5, 19)$ into the equation, we have $19 = 3(5) + b$, which gives us $b = 19 - 15 = 4$.
Therefore, the equation of the line passing through these two points is $y = 3x + 4$.
Substituting $x = 28$ into this equation, we can find the value of $t$:
$t = 3(28) + 4 = 84 + 4 = \boxed{88}$.
The answer is: \boxed{88}<end_of_reasoning>


Example 4:
The question is :
Five socks, colored blue, brown, black, red, and purple are in a drawer. In how many different ways can we choose three socks from the drawer if the order of the socks does not matter?

The reasoning steps are:
This is a combination problem, since the order of the socks does not matter.
We want to choose 3 out of the 5 socks, so we can use the formula for combinations:
$\binom{n}{k}=\dfrac{n!}{k!(n-k)!}$.
In this case, $n=5$ (the total number of socks) and $k=3$ (the number of socks to choose).
Plugging in the values, we get $\binom{5}{3}=\dfrac{5!}{3!(5-3)!}=\dfrac{5!}{3!2!}=\dfrac{5\times4\times3\times2\times1}{3\times2\times1\times2\times1}=\dfrac{5\times4}{2\times1}=\boxed{10}$.
The answer is: \boxed{10}<end_of_reasoning>"""

LOGIC_MRC_COT_4_SHOT = r"""Example 1:

Passage: A professional baseball team manager, in order to have the funds to sign a new second-baseman, discreetly arranged to trade one of the most popular outfielders on the team for a lesser-known player and an undisclosed amount of money. The manager secretly considered the outfielder to be overrated and overpaid. Reporters forcefully criticized the trade, arguing that the team had lost its best player and that the manager had violated his fiduciary duties to the team and the fans. A few weeks after being traded, the outfielder was retraded, for twice the value received by the original team manager. Plainly, the outfielder' s price shows that the reporters' criticism of the manager' s action was accurate.
Question: The reasoning in the argument is vulnerable to the criticism that the argument does which one of the following?
A. The argument bases its conclusion on what the best decision is for the present on uncertain projections about what the best decision will be for the future.
B. The argument rejects a well-established way of achieving an end without explaining why an unconventional way is better suited for achieving the end.
C. The argument ignores the opinions of expert reporters in the field of baseball when there is no superior source of information.
D. The argument bases its conclusion on facts that could, considering the circumstances, have been the product of circumstances other than those presumed by the argument's proponents.

The reasoning steps are:

The passage argues that the reporters' criticism of the manager's decision was accurate because the outfielder was retraded for twice the value. 
However, this change in the outfielder's value could be due to various factors other than the manager's poor decision-making, such as market fluctuations, the outfielder's performance, or the demands of other teams. 
The argument does not consider these other possible circumstances when concluding that the manager's decision was wrong.
The answer is D.<end_of_reasoning>


Example 2:

Passage: Quality control investigator: Upon testing samples of products from our supplier that were sent by our field inspectors from various manufacturing locations, our laboratory discovered that over 20 percent of the samples were defective. Since our supplier is contractually required to limit the rate of defects among items it manufactures for us to below 5 percent, it has violated its contract with us.
Question: The reasoning in the quality control investigator's argument is flawed in that the argument
A. presumes, without providing justification, that the field inspectors were just as likely to choose a defective item for testing as they were to choose a nondefective item
B. presumes, without providing justification, that the field inspectors made an equal number of visits to each of the various manufacturing sites of the supplier
C. overlooks the possibility that the field inspectors tend to choose items for testing that they suspect are defective
D. bases its conclusion on too small a sample of items tested by the laboratory

The reasoning steps are:

The reasoning in the quality control investigator's argument is flawed because it overlooks the possibility that the field inspectors tend to choose items for testing that they suspect are defective.
This means that the 20 percent defect rate discovered by the laboratory might not accurately represent the overall defect rate among the items manufactured by the supplier.
The answer is: C.<end_of_reasoning>


Example 3:

Passage: The Levant -- the area that borders the eastern Mediterranean-was heavily populated in prehistoric times. The southern Levant was abandoned about 6, 000 years ago, although the northern Levant, which shared the same climate, remained heavily populated. Recently archaeologists have hypothesized that the sudden depopulation in the southern Levant was due to an economic collapse resulting from deforestation.
Question: If the statements above are true and the archaeologists' hypothesis is correct, which one of the following CANNOT be true?
A. The sheep and goats herded by the peoples of the southern Levant until 6, 000 years ago grazed extensively on the seedlings and saplings of indigenous tree species.
B. Carbon dating of organic remains from the southern Levant reliably demonstrates that there were no forests present in that area prior to 6, 000 years ago.
C. Organic remains from the northern Levant reliably indicate that tree species flourished there without interruption during the period when the southern Levant was being abandoned.
D. Since there are few traces of either quarried stone or of mud brick in buildings excavated in the southern Levant, it is likely that the buildings built there prior to 6, 000 years ago were made almost entirely of timber.

The reasoning steps are:

If there were no forests present in the southern Levant prior to 6, 000 years ago, it would not make sense for the cause of the economic collapse to be deforestation, as the area would have already been deforested. 
This contradicts the archaeologists' hypothesis, making option B the correct answer."
The answer is: B.<end_of_reasoning>


Example 4:

Passage: The most successful economies have been, and will continue to be, those that train as many people as possible in the human skills required to research, to develop, and to apply new technology. Japan is a model for this sort of training effort. Europe as a whole is in a weaker position: there is a shortage of skilled labor trained to use the new technologies, and there are not enough scientists able to develop and apply the technology. However, even in Japan there is a shortage of technically qualified people, and, like most European countries, Japan has far too many workers qualified to perform only menial tasks.
Question: Which one of the following can be properly inferred from the passage?
A. To be economically more successful, Europe needs to train more people in the new technologies.
B. Japan's successful economy depends upon an uncommonly narrow base of highly skilled labor.
C. Japan is not the best country against which to measure a country's economic success.
D. European countries have economies that are more successful than those of most other countries.

The reasoning steps are:

To be economically more successful, Europe needs to train more people in the new technologies.
The passage states that the most successful economies are those that train as many people as possible in the required human skills.
It also mentions that Europe is in a weaker position due to a shortage of skilled labor and scientists in new technologies.
Therefore, we can infer that training more people in new technologies would help Europe to become economically more successful.
The answer is A.<end_of_reasoning>"""
